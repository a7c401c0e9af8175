# lenet-throughput.svg from lenet-throughput.dat, written by `ringbench report`.
# Regenerate: gnuplot lenet-throughput.gp > lenet-throughput.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'lenet: total img/s vs nodes (median over repeats, 95% CI)' noenhanced
set xlabel 'nodes (N, one rank each)'
set ylabel 'total img/s'
set grid
set key outside right top noenhanced
set xrange [3.5:4.5]
set xtics (4)
set yrange [0:*]
plot 'lenet-throughput.dat' index 0 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 1', \
     'lenet-throughput.dat' index 1 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 1 segment 256K', \
     'lenet-throughput.dat' index 2 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 1 segment 4M', \
     'lenet-throughput.dat' index 3 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 1 first bucket MiB 0.25', \
     'lenet-throughput.dat' index 4 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 1 first bucket MiB 0.25 segment 256K', \
     'lenet-throughput.dat' index 5 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 1 first bucket MiB 0.25 segment 4M', \
     'lenet-throughput.dat' index 6 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 1 first bucket MiB 4', \
     'lenet-throughput.dat' index 7 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 1 first bucket MiB 4 segment 256K', \
     'lenet-throughput.dat' index 8 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 1 first bucket MiB 4 segment 4M', \
     'lenet-throughput.dat' index 9 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 4', \
     'lenet-throughput.dat' index 10 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 4 segment 256K', \
     'lenet-throughput.dat' index 11 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 4 segment 4M', \
     'lenet-throughput.dat' index 12 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 4 first bucket MiB 0.25', \
     'lenet-throughput.dat' index 13 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 4 first bucket MiB 0.25 segment 256K', \
     'lenet-throughput.dat' index 14 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 4 first bucket MiB 0.25 segment 4M', \
     'lenet-throughput.dat' index 15 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 4 first bucket MiB 4', \
     'lenet-throughput.dat' index 16 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 4 first bucket MiB 4 segment 256K', \
     'lenet-throughput.dat' index 17 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 4 first bucket MiB 4 segment 4M', \
     'lenet-throughput.dat' index 18 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 16', \
     'lenet-throughput.dat' index 19 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 16 segment 256K', \
     'lenet-throughput.dat' index 20 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 16 segment 4M', \
     'lenet-throughput.dat' index 21 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 16 first bucket MiB 0.25', \
     'lenet-throughput.dat' index 22 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 16 first bucket MiB 0.25 segment 256K', \
     'lenet-throughput.dat' index 23 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 16 first bucket MiB 0.25 segment 4M', \
     'lenet-throughput.dat' index 24 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 16 first bucket MiB 4', \
     'lenet-throughput.dat' index 25 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 16 first bucket MiB 4 segment 256K', \
     'lenet-throughput.dat' index 26 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 16 first bucket MiB 4 segment 4M', \
     'lenet-throughput.dat' index 27 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 64', \
     'lenet-throughput.dat' index 28 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 64 segment 256K', \
     'lenet-throughput.dat' index 29 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 64 segment 4M', \
     'lenet-throughput.dat' index 30 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 64 first bucket MiB 0.25', \
     'lenet-throughput.dat' index 31 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 64 first bucket MiB 0.25 segment 256K', \
     'lenet-throughput.dat' index 32 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 64 first bucket MiB 0.25 segment 4M', \
     'lenet-throughput.dat' index 33 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 64 first bucket MiB 4', \
     'lenet-throughput.dat' index 34 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 64 first bucket MiB 4 segment 256K', \
     'lenet-throughput.dat' index 35 using 1:2:3 with yerrorlines title 'tcp b32 wire fp16 fusion MiB 64 first bucket MiB 4 segment 4M', \
     'lenet-throughput.dat' index 36 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 1', \
     'lenet-throughput.dat' index 37 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 1 segment 256K', \
     'lenet-throughput.dat' index 38 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 1 segment 4M', \
     'lenet-throughput.dat' index 39 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 1 first bucket MiB 0.25', \
     'lenet-throughput.dat' index 40 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 1 first bucket MiB 0.25 segment 256K', \
     'lenet-throughput.dat' index 41 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 1 first bucket MiB 0.25 segment 4M', \
     'lenet-throughput.dat' index 42 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 1 first bucket MiB 4', \
     'lenet-throughput.dat' index 43 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 1 first bucket MiB 4 segment 256K', \
     'lenet-throughput.dat' index 44 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 1 first bucket MiB 4 segment 4M', \
     'lenet-throughput.dat' index 45 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 4', \
     'lenet-throughput.dat' index 46 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 4 segment 256K', \
     'lenet-throughput.dat' index 47 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 4 segment 4M', \
     'lenet-throughput.dat' index 48 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 4 first bucket MiB 0.25', \
     'lenet-throughput.dat' index 49 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 4 first bucket MiB 0.25 segment 256K', \
     'lenet-throughput.dat' index 50 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 4 first bucket MiB 0.25 segment 4M', \
     'lenet-throughput.dat' index 51 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 4 first bucket MiB 4', \
     'lenet-throughput.dat' index 52 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 4 first bucket MiB 4 segment 256K', \
     'lenet-throughput.dat' index 53 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 4 first bucket MiB 4 segment 4M', \
     'lenet-throughput.dat' index 54 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 16', \
     'lenet-throughput.dat' index 55 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 16 segment 256K', \
     'lenet-throughput.dat' index 56 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 16 segment 4M', \
     'lenet-throughput.dat' index 57 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 16 first bucket MiB 0.25', \
     'lenet-throughput.dat' index 58 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 16 first bucket MiB 0.25 segment 256K', \
     'lenet-throughput.dat' index 59 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 16 first bucket MiB 0.25 segment 4M', \
     'lenet-throughput.dat' index 60 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 16 first bucket MiB 4', \
     'lenet-throughput.dat' index 61 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 16 first bucket MiB 4 segment 256K', \
     'lenet-throughput.dat' index 62 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 16 first bucket MiB 4 segment 4M', \
     'lenet-throughput.dat' index 63 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 64', \
     'lenet-throughput.dat' index 64 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 64 segment 256K', \
     'lenet-throughput.dat' index 65 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 64 segment 4M', \
     'lenet-throughput.dat' index 66 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 64 first bucket MiB 0.25', \
     'lenet-throughput.dat' index 67 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 64 first bucket MiB 0.25 segment 256K', \
     'lenet-throughput.dat' index 68 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 64 first bucket MiB 0.25 segment 4M', \
     'lenet-throughput.dat' index 69 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 64 first bucket MiB 4', \
     'lenet-throughput.dat' index 70 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 64 first bucket MiB 4 segment 256K', \
     'lenet-throughput.dat' index 71 using 1:2:3 with yerrorlines title 'tcp b32 wire none fusion MiB 64 first bucket MiB 4 segment 4M'
