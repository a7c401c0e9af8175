# remote-mobilenet_v1-b8-s64.svg from remote-mobilenet_v1-b8-s64.dat, written by `ringbench report`.
# Regenerate: gnuplot remote-mobilenet_v1-b8-s64.gp > remote-mobilenet_v1-b8-s64.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'remote training: % of local img/s against the device link''s rate' noenhanced
set xlabel 'device link (Gbit/s)'
set ylabel '% of local img/s'
set grid
set key outside right top noenhanced
set key inside top left Left reverse noenhanced font ',9'
set logscale x
set xrange [0.2:15]
set yrange [0:*]
plot 'remote-mobilenet_v1-b8-s64.dat' index 0 using 1:2:3 with yerrorlines pt 7 title 'measured, 50 us', \
     'remote-mobilenet_v1-b8-s64.dat' index 1 using 1:2:3 with yerrorlines pt 7 title 'measured, 500 us', \
     'remote-mobilenet_v1-b8-s64.dat' index 2 using 1:2:3 with yerrorlines pt 7 title 'measured, 1000 us', \
     'remote-mobilenet_v1-b8-s64.dat' index 3 using 1:2:3 with yerrorlines pt 7 title 'measured, 2000 us', \
     'remote-mobilenet_v1-b8-s64.dat' index 4 using 1:2 with points pt 6 title 'predicted (loopback + link), 50 us', \
     'remote-mobilenet_v1-b8-s64.dat' index 5 using 1:2 with points pt 6 title 'predicted (loopback + link), 500 us', \
     'remote-mobilenet_v1-b8-s64.dat' index 6 using 1:2 with points pt 6 title 'predicted (loopback + link), 1000 us', \
     'remote-mobilenet_v1-b8-s64.dat' index 7 using 1:2 with points pt 6 title 'predicted (loopback + link), 2000 us', \
     90 with lines dt 2 lc rgb 'gray40' title '90%', \
     50 with lines dt 3 lc rgb 'gray60' title '50%'
