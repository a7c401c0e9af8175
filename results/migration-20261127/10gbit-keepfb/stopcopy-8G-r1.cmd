/tmp/rb-new2 train --model mobilenet_v1 --image-size 96 --batch 8 --threads 1 --warmup 5 --steps 300 --log-every 10 --timeout 60
              --migrate-at 15 --migrate-rank 2 --migrate-method stopcopy --migrate-netns ringbench-n3 --framebuffer 8G
