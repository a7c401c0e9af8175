# mobilenet_v1-share-throughput.svg from mobilenet_v1-share-throughput.dat, written by `ringbench report`.
# Regenerate: gnuplot mobilenet_v1-share-throughput.gp > mobilenet_v1-share-throughput.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'mobilenet_v1: img/s per VM, 1 VM alone and k VMs (median, 95% CI)' noenhanced
set xlabel 'vGPU profile'
set ylabel 'img/s per VM'
set grid
set key outside right top noenhanced
set xrange [-0.5:2.5]
set xtics ('T4-4C' 0, 'T4-8C' 1, 'T4-16C' 2) noenhanced
set key below noenhanced
set style fill solid 0.8 border -1
set boxwidth 0.133333 absolute
set yrange [0:*]
plot 'mobilenet_v1-share-throughput.dat' index 0 using 1:2:3 with boxerrorbars title 'best_effort, 1 VM', \
     'mobilenet_v1-share-throughput.dat' index 1 using 1:2:3 with boxerrorbars title 'best_effort, 2 VMs', \
     'mobilenet_v1-share-throughput.dat' index 2 using 1:2:3 with boxerrorbars title 'equal_share, 1 VM', \
     'mobilenet_v1-share-throughput.dat' index 3 using 1:2:3 with boxerrorbars title 'equal_share, 2 VMs', \
     'mobilenet_v1-share-throughput.dat' index 4 using 1:2:3 with boxerrorbars title 'fixed_share, 1 VM', \
     'mobilenet_v1-share-throughput.dat' index 5 using 1:2:3 with boxerrorbars title 'fixed_share, 2 VMs'
