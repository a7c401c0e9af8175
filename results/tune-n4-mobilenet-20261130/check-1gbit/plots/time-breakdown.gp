# time-breakdown.svg from time-breakdown.dat, written by `ringbench report`.
# Regenerate: gnuplot time-breakdown.gp > time-breakdown.svg
set terminal svg size 720,420 dynamic enhanced font 'sans,11' background rgb 'white'
set title 'where a training step goes (seconds, mean over ranks and repeats)' noenhanced
set xlabel ''
set ylabel 'seconds per step'
set grid
set key outside right top noenhanced
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set xtics rotate by -30 left noenhanced
set yrange [0:*]
plot 'time-breakdown.dat' using 2:xtic(1) title 'compute', '' using 3 title 'exposed comm', '' using 4 title 'optimizer'
