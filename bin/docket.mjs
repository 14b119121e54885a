#!/usr/bin/env node
// The `docket` command. Runs the TypeScript sources directly: tsx's ESM loader
// is registered first, so no build step is needed.
import { register } from "tsx/esm/api"

register()
await import("../src/cli/main.ts")
