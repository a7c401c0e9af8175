# infer-mobilenet-vs-inception.svg from infer-mobilenet-vs-inception.dat, written by `ringbench report`.
# Regenerate: gnuplot infer-mobilenet-vs-inception.gp > infer-mobilenet-vs-inception.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'MobileNet v1 / Inception v3 Offline throughput against their MAC ratio' noenhanced
set xlabel 'batch (samples)'
set ylabel 'ratio'
set grid
set key outside right top noenhanced
set logscale x 2
set yrange [0:*]
plot 'infer-mobilenet-vs-inception.dat' index 0 using 1:2:3 with linespoints title 'MobileNet v1 96px / Inception v3 128px, T4-4C', \
     'infer-mobilenet-vs-inception.dat' index 1 using 1:2:3 with linespoints title 'MobileNet v1 96px / Inception v3 128px, T4-8C', \
     'infer-mobilenet-vs-inception.dat' index 2 using 1:2:3 with linespoints title 'MAC ratio, 128px / 96px', \
     'infer-mobilenet-vs-inception.dat' index 3 using 1:2:3 with linespoints title 'MAC ratio, 128px / 96px', \
     8.8 with lines dashtype 2 title 'published MAC ratio at full size (8.8)'
