# mobilenet_v1-throughput.svg from mobilenet_v1-throughput.dat, written by `ringbench report`.
# Regenerate: gnuplot mobilenet_v1-throughput.gp > mobilenet_v1-throughput.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'mobilenet_v1: total img/s vs nodes (median over repeats, 95% CI)' noenhanced
set xlabel 'nodes (N, one rank each)'
set ylabel 'total img/s'
set grid
set key outside right top noenhanced
set xrange [3.5:4.5]
set xtics (4)
set yrange [0:*]
plot 'mobilenet_v1-throughput.dat' index 0 using 1:2:3 with yerrorlines title 'tcp b8 96px', \
     'mobilenet_v1-throughput.dat' index 1 using 1:2:3 with yerrorlines title 'tcp b8 96px wire fp16 fusion MiB 1', \
     'mobilenet_v1-throughput.dat' index 2 using 1:2:3 with yerrorlines title 'tcp b8 96px wire fp16 fusion MiB 1 first bucket MiB 0.25', \
     'mobilenet_v1-throughput.dat' index 3 using 1:2:3 with yerrorlines title 'tcp b8 96px wire fp16 fusion MiB 4'
