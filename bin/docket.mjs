#!/usr/bin/env node
// The `docket` command.
//
// An installed package has dist/ (the compiled command, `npm run build`) and
// no src/: plain node runs dist/cli/main.js, and tsx is loaded only when a
// task file is TypeScript (src/cli/tasks.ts). A git checkout has src/: the
// sources run under tsx, so `npm install && npm start`, the tests and
// `node bin/docket.mjs` work on a fresh clone with no build step, and never
// run a dist/ left by an older commit (or one a test is rebuilding). Which one
// runs depends only on what is on disk, never on timestamps.
import { existsSync, readFileSync } from "node:fs"

// `docket --version` alone is answered from package.json: loading the command
// means loading @effect/cli and Effect, about 800 modules (~1 s here, ~0.6 s of
// it @effect/cli's own imports), to print one line.
if (process.argv.length === 3 && process.argv[2] === "--version") {
  const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"))
  process.stdout.write(`${pkg.version}\n`)
} else if (existsSync(new URL("../src/cli/main.ts", import.meta.url))) {
  // The dependencies every command loads are imported first, before the
  // loader is registered: loaded through tsx's hooks, Effect's modules take
  // about twice as long to start. They are the same module instances the
  // sources import afterwards. Only what every command needs, by the modules'
  // own paths as the sources import them: the packages' indexes (effect's
  // loads all 362 of its modules) and both SQL drivers (one is ever used)
  // would cost more than going through the hooks for the few that remain.
  // `enqueue`, `stats` and `worker` are mostly parsed without @effect/cli
  // (src/cli/hotArgv.ts): its modules are not preloaded for them.
  const { register } = await import("tsx/esm/api")
  const hot = ["enqueue", "stats", "worker"].includes(process.argv.slice(2).find((arg) => !arg.startsWith("-")) ?? "")
  await Promise.all([
    import("effect/Effect"),
    import("effect/Schema"),
    ...(hot ? [] : [
      import("@effect/cli/Command"),
      import("@effect/platform-node/NodeFileSystem"),
      import("@effect/platform-node/NodePath"),
      import("@effect/platform-node/NodeTerminal")
    ]),
    import("@effect/platform-node/NodeRuntime"),
    import("@effect/sql/SqlClient"),
    import("@effect/sql/Migrator")
  ])
  register()
  globalThis.__docketTsxRegistered = true
  await import("../src/cli/main.ts")
} else {
  await import("../dist/cli/main.js")
}
