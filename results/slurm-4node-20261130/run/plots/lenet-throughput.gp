# lenet-throughput.svg from lenet-throughput.dat, written by `ringbench report`.
# Regenerate: gnuplot lenet-throughput.gp > lenet-throughput.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'lenet: total img/s vs nodes (median over repeats, 95% CI)' noenhanced
set xlabel 'nodes (N, one rank each)'
set ylabel 'total img/s'
set grid
set key outside right top noenhanced
set xrange [0.5:4.5]
set xtics (1, 2, 4)
set yrange [0:*]
plot 'lenet-throughput.dat' index 0 using 1:2:3 with yerrorlines title 'tcp', \
     'lenet-throughput.dat' index 1 using 1:2:3 with yerrorlines title 'mpi'
