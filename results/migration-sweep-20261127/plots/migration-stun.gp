# migration-stun.svg from migration-stun.dat, written by `ringbench report`.
# Regenerate: gnuplot migration-stun.gp > migration-stun.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'stun time against framebuffer size (filled: measured, median and min-max; hollow: predicted)' noenhanced
set xlabel 'framebuffer (GiB)'
set ylabel 'stun (s)'
set grid
set key outside right top noenhanced
set key below noenhanced
set xrange [0:25.92]
set yrange [0:*]
plot 'migration-stun.dat' index 0 using 1:2:3:4 with yerrorbars pt 7 ps 1.2 lc rgb '#d62728' title 'stop-and-copy, measured', \
     'migration-stun.dat' index 1 using 1:2 with points pt 6 ps 1.6 lc rgb '#d62728' title 'stop-and-copy, predicted', \
     0.109755 + 0.93364*x with lines dt 3 lc rgb '#d62728' title 'stop-and-copy model: t0 + F/R', \
     'migration-stun.dat' index 2 using 1:2:3:4 with yerrorbars pt 5 ps 1.2 lc rgb '#1f77b4' title 'pre-copy, measured', \
     'migration-stun.dat' index 3 using 1:2 with points pt 4 ps 1.6 lc rgb '#1f77b4' title 'pre-copy, predicted', \
     0.295753 with lines dt 3 lc rgb '#1f77b4' title 'pre-copy model: t0 + W/R', \
     1 with lines dt 2 lc rgb 'gray40' title '1 s (vMotion stun target)'
