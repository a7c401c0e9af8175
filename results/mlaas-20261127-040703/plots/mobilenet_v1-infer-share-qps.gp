# mobilenet_v1-infer-share-qps.svg from mobilenet_v1-infer-share-qps.dat, written by `ringbench report`.
# Regenerate: gnuplot mobilenet_v1-infer-share-qps.gp > mobilenet_v1-infer-share-qps.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'mobilenet_v1: QPS at the p99 bound per VM, 1 VM alone and k VMs (median, 95% CI)' noenhanced
set xlabel 'vGPU profile'
set ylabel 'QPS at the p99 bound'
set grid
set key outside right top noenhanced
set xrange [-0.5:1.5]
set xtics ('T4-4C' 0, 'T4-8C' 1) noenhanced
set key below noenhanced
set style fill solid 0.8 border -1
set boxwidth 0.133333 absolute
set yrange [0:*]
plot 'mobilenet_v1-infer-share-qps.dat' index 0 using 1:2:3 with boxerrorbars title 'best_effort, 1 VM, per VM', \
     'mobilenet_v1-infer-share-qps.dat' index 1 using 1:2:3 with boxerrorbars title 'best_effort, 2 VMs, per VM', \
     'mobilenet_v1-infer-share-qps.dat' index 2 using 1:2:3 with boxerrorbars title 'best_effort, 2 VMs, total', \
     'mobilenet_v1-infer-share-qps.dat' index 3 using 1:2:3 with boxerrorbars title 'fixed_share, 1 VM, per VM', \
     'mobilenet_v1-infer-share-qps.dat' index 4 using 1:2:3 with boxerrorbars title 'fixed_share, 2 VMs, per VM', \
     'mobilenet_v1-infer-share-qps.dat' index 5 using 1:2:3 with boxerrorbars title 'fixed_share, 2 VMs, total'
