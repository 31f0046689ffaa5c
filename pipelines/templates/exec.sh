set -uo pipefail
durations=()
[ -f "backend/${CONFIG_DIR}/.test_durations" ] && durations=(--durations "backend/${CONFIG_DIR}/.test_durations")
# Config labels select files for this trigger (exec --labels); none: the whole tier.
labels=()
[ -n "${LABELS}" ] && labels=(--labels "${LABELS}")
rm -rf "results/shard-${SHARD}"
.venv/bin/testcurator exec --config "backend/${CONFIG_DIR}" --torch-root pytorch --device "${DEVICE}" \
  --backend "${BACKEND_MODULE}" --shard "${SHARD}/${SHARDS}" --tier "${TIER}" "${labels[@]}" "${durations[@]}" \
  --out "results/shard-${SHARD}" -q <<exec_args>>
rc=$?
echo "rc=${rc}" >> "${GITHUB_OUTPUT}"
echo "exec exit code ${rc}"
