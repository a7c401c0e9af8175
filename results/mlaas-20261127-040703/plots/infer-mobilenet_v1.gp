# infer-mobilenet_v1.svg from infer-mobilenet_v1.dat, written by `ringbench report`.
# Regenerate: gnuplot infer-mobilenet_v1.gp > infer-mobilenet_v1.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'mobilenet_v1: Offline throughput against batch' noenhanced
set xlabel 'batch (samples)'
set ylabel 'samples/s (median over repeats)'
set grid
set key outside right top noenhanced
set logscale x 2
set yrange [0:*]
plot 'infer-mobilenet_v1.dat' index 0 using 1:2:3 with yerrorlines title 'mobilenet_v1 96px, batches up to 8, T4-4C', \
     'infer-mobilenet_v1.dat' index 1 using 1:2:3 with yerrorlines title 'mobilenet_v1 96px, batches up to 8, T4-8C'
