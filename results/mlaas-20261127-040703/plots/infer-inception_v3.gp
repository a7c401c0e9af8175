# infer-inception_v3.svg from infer-inception_v3.dat, written by `ringbench report`.
# Regenerate: gnuplot infer-inception_v3.gp > infer-inception_v3.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'inception_v3: Offline throughput against batch' noenhanced
set xlabel 'batch (samples)'
set ylabel 'samples/s (median over repeats)'
set grid
set key outside right top noenhanced
set logscale x 2
set yrange [0:*]
plot 'infer-inception_v3.dat' index 0 using 1:2:3 with yerrorlines title 'inception_v3 128px, batches up to 8, T4-4C', \
     'infer-inception_v3.dat' index 1 using 1:2:3 with yerrorlines title 'inception_v3 128px, batches up to 8, T4-8C'
