# busbw.svg from busbw.dat, written by `ringbench report`.
# Regenerate: gnuplot busbw.gp > busbw.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'allreduce busbw vs message size (out-of-place, median over repeats, 95% CI)' noenhanced
set xlabel 'message size (bytes)'
set ylabel 'busbw (GB/s)'
set grid
set key outside right top noenhanced
set logscale x 2
set format x '%.0b%BB'
set yrange [0:*]
plot 'busbw.dat' index 0 using 1:2:3 with yerrorlines title 'tcp N=4'
