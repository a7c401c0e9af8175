# lenet-efficiency.svg from lenet-efficiency.dat, written by `ringbench report`.
# Regenerate: gnuplot lenet-efficiency.gp > lenet-efficiency.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'lenet: scaling efficiency vs nodes (mean over repeats, 95% CI)' noenhanced
set xlabel 'nodes (N, one rank each)'
set ylabel 'scaling efficiency'
set grid
set key outside right top noenhanced
set xrange [0.5:4.5]
set xtics (1, 2, 4)
set yrange [0:1.15]
plot 'lenet-efficiency.dat' index 0 using 1:2:3 with yerrorlines title 'tcp', \
     'lenet-efficiency.dat' index 1 using 1:2:3 with yerrorlines title 'mpi', \
     1 with lines dt 2 lc rgb 'gray40' title 'ideal'
