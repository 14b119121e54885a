// Installs the peers the benchmark needs beside the project's own
// dependencies: graphile-worker 0.17 (its local queue and batched completion,
// the configuration the targets compare against; the devDependency is 0.16,
// which has neither) into .tmp/bench-peers, once.
import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"

const dir = ".tmp/bench-peers"
if (!existsSync(`${dir}/node_modules/graphile-worker/package.json`)) {
  console.log(`installing graphile-worker@0.17.3 into ${dir} (once)`)
  execFileSync("npm", ["install", "--prefix", dir, "--no-audit", "--no-fund", "graphile-worker@0.17.3"], { stdio: "inherit" })
}
