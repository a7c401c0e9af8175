# mobilenet_v1-share-utilization.svg from mobilenet_v1-share-utilization.dat, written by `ringbench report`.
# Regenerate: gnuplot mobilenet_v1-share-utilization.gp > mobilenet_v1-share-utilization.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'mobilenet_v1: device utilization, 1 VM alone and k VMs (mean, 95% CI)' noenhanced
set xlabel 'vGPU profile'
set ylabel 'device utilization (%)'
set grid
set key outside right top noenhanced
set xrange [-0.5:2.5]
set xtics ('T4-4C' 0, 'T4-8C' 1, 'T4-16C' 2) noenhanced
set key below noenhanced
set style fill solid 0.8 border -1
set boxwidth 0.133333 absolute
set yrange [0:110]
plot 'mobilenet_v1-share-utilization.dat' index 0 using 1:2:3 with boxerrorbars title 'best_effort, 1 VM, per VM', \
     'mobilenet_v1-share-utilization.dat' index 1 using 1:2:3 with boxerrorbars title 'best_effort, 2 VMs, device total', \
     'mobilenet_v1-share-utilization.dat' index 2 using 1:2:3 with boxerrorbars title 'equal_share, 1 VM, per VM', \
     'mobilenet_v1-share-utilization.dat' index 3 using 1:2:3 with boxerrorbars title 'equal_share, 2 VMs, device total', \
     'mobilenet_v1-share-utilization.dat' index 4 using 1:2:3 with boxerrorbars title 'fixed_share, 1 VM, per VM', \
     'mobilenet_v1-share-utilization.dat' index 5 using 1:2:3 with boxerrorbars title 'fixed_share, 2 VMs, device total'
