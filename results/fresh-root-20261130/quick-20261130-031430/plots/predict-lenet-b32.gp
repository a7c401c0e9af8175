# predict-lenet-b32.svg from predict-lenet-b32.dat, written by `ringbench report`.
# Regenerate: gnuplot predict-lenet-b32.gp > predict-lenet-b32.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'lenet b32: predicted scaling efficiency vs nodes (lines) and measured (points)' noenhanced
set xlabel 'nodes (N, one rank each)'
set ylabel 'scaling efficiency'
set grid
set key outside right top noenhanced
set logscale x 2
set xrange [1:1024]
set yrange [0:1.05]
plot 'predict-lenet-b32.dat' index 0 using 1:2 with lines lw 2 lc 1 title 'tcp ring (predicted)', \
     'predict-lenet-b32.dat' index 1 using 1:2 with lines dt 2 lc 1 title 'tcp halving-doubling (predicted)', \
     'predict-lenet-b32.dat' index 2 using 1:2 with points pt 7 ps 1.2 lc 1 title 'tcp measured'
