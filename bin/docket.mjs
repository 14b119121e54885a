#!/usr/bin/env node
// The `docket` command. Runs the TypeScript sources directly (no build step):
// tsx's ESM loader is registered, then the command is imported.
//
// The dependencies are imported first, before the loader is registered: loaded
// through tsx's hooks, Effect's thousand modules take about twice as long to
// start. They are the same module instances the sources import afterwards.
import { register } from "tsx/esm/api"

await Promise.all([
  import("effect"),
  import("@effect/cli"),
  import("@effect/platform-node/NodeContext"),
  import("@effect/platform-node/NodeRuntime"),
  import("@effect/sql"),
  import("@effect/sql-pg"),
  import("@effect/sql-sqlite-node")
])
register()
globalThis.__docketTsxRegistered = true
await import("../src/cli/main.ts")
