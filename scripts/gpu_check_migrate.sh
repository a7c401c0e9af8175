# Sourced by scripts/gpu_check.sh ($bindir, $out, $python, fail): live migration of a training
# rank whose model lives on the GPU. Three ranks of MobileNet v1 share the one GPU over shm; rank 2
# moves to a new process after step MIGRATE_AT, by pre-copy and by stop-and-copy, beside a run
# where it stays. What this proves on a GPU: the moving rank's parameters, momentum and batch-norm
# statistics come off the device into its framebuffer (emulated in host memory; see
# runner/migrate/framebuffer.h) and go back onto the target's device, and every rank ends with the
# same parameters (rank 0 fails the run otherwise). Batch-norm statistics are each rank's own
# (from its own batches), so they are not compared across ranks. Runs on one GPU need not match
# each other bit for bit: cuDNN's measured algorithms may differ from process to process.
# env: MIGRATE_BATCH (32), MIGRATE_SIZE (224 px), MIGRATE_STEPS (30), MIGRATE_AT (10), FRAMEBUFFER (4G),
#      MIGRATE_TAG (file names' suffix), MIGRATE_METHODS ("none precopy stopcopy"; none: the rank stays),
#      MIGRATE_TO (local: the moving rank starts its target; standby: the launcher starts a standby
#      target with the job, as on node B of a cluster).
mig_batch=${MIGRATE_BATCH:-32}
mig_size=${MIGRATE_SIZE:-224}
mig_tag=${MIGRATE_TAG:-}
echo "== live migration of a rank on the GPU: 3 ranks of mobilenet_v1 batch $mig_batch at $mig_size px over shm," \
  "rank 2 moves to a ${MIGRATE_TO:-local} target, framebuffer ${FRAMEBUFFER:-4G} =="
mig_common=(train --model mobilenet_v1 --batch "$mig_batch" --image-size "$mig_size" --ranks 3 --transport shm
  --device cuda --warmup 3 --steps "${MIGRATE_STEPS:-30}" --log-every 0 --timeout 60)
for mig in ${MIGRATE_METHODS:-none precopy stopcopy}; do
  mig_extra=()
  [ "$mig" = none ] || mig_extra=(--migrate-at "${MIGRATE_AT:-10}" --migrate-method "$mig" --framebuffer "${FRAMEBUFFER:-4G}"
    --migrate-to "${MIGRATE_TO:-local}")
  timeout 300 "$bindir/ringbench" "${mig_common[@]}" "${mig_extra[@]}" --json "$out/migrate-$mig$mig_tag.json" \
    >"$out/migrate-$mig$mig_tag.txt" 2>&1 || fail "train with migration $mig (see $out/migrate-$mig$mig_tag.txt)"
  echo "migrate-$mig$mig_tag: $(grep -E '^Total img/sec' "$out/migrate-$mig$mig_tag.txt")"
  grep -E '^# migration of rank' "$out/migrate-$mig$mig_tag.txt"
done
"$python" - "$out" "$mig_tag" ${MIGRATE_METHODS:-none precopy stopcopy} <<'PY' || fail "migration on the GPU: a rank did not move, or the ranks' parameters differ"
import json, sys
out, tag, bad = sys.argv[1], sys.argv[2], 0
for m in sys.argv[3:]:
    try:
        d = json.load(open(f"{out}/migrate-{m}{tag}.json"))
    except (OSError, ValueError) as e:
        print(f"migrate-{m}{tag}: no result ({e})"); bad = 1; continue
    same = len(set(map(str, d["summary"]["final_hashes"]["params"]))) == 1
    g = d.get("migration", {})
    print(f"migrate-{m}{tag}: ranks' final parameters {'identical' if same else 'DIFFER'}; "
          f"loss {d['summary']['final_loss']:.6f}" + (f"; moved {g.get('moved')}, stun {g.get('stun_s', 0):.3f} s, "
          f"total {g.get('total_s', 0):.2f} s, ring stall {g.get('ring_stall_s', 0):.3f} s" if g else ""))
    bad |= not same or (m != "none" and not g.get("moved"))
    if m != "none": print(f"migrate-{m}{tag}: target {'a standby started with the job' if g.get('standby') else 'started by the moving rank'}")
sys.exit(bad)
PY
