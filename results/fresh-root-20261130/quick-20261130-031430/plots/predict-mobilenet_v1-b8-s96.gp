# predict-mobilenet_v1-b8-s96.svg from predict-mobilenet_v1-b8-s96.dat, written by `ringbench report`.
# Regenerate: gnuplot predict-mobilenet_v1-b8-s96.gp > predict-mobilenet_v1-b8-s96.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'mobilenet_v1 b8 96px: predicted scaling efficiency vs nodes (lines) and measured (points)' noenhanced
set xlabel 'nodes (N, one rank each)'
set ylabel 'scaling efficiency'
set grid
set key outside right top noenhanced
set logscale x 2
set xrange [1:1024]
set yrange [0:1.05]
plot 'predict-mobilenet_v1-b8-s96.dat' index 0 using 1:2 with lines lw 2 lc 1 title 'tcp ring (predicted)', \
     'predict-mobilenet_v1-b8-s96.dat' index 1 using 1:2 with lines dt 2 lc 1 title 'tcp halving-doubling (predicted)', \
     'predict-mobilenet_v1-b8-s96.dat' index 2 using 1:2 with points pt 7 ps 1.2 lc 1 title 'tcp measured'
