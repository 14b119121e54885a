// Bundles the two commands that run most often from scripts and cron,
// `docket enqueue` and `docket stats` (a plain command line: src/cli/hotArgv.ts),
// into dist/hot/: the compiled modules they load (Docket's, Effect's and the
// SQL clients', about 650 files) become a dozen tree-shaken files, so one of
// these commands starts in about a third of the time and 16 MB less memory
// (docs/benchmarks.md, issue 34). Everything else (every other command, the
// library, the worker, task files) runs the unbundled dist/ over the
// application's own Effect, as before.
//
// Why a bundle here and nowhere else: the package ships no bundle of Effect
// because a process that loads the application's task files (the worker, the
// demo) or is the application (the library) must hold one Effect, the
// application's (docs/operations.md). `enqueue` and `stats` read their
// command line and a database and exit: no code of the application runs in
// them, so their own copy of Effect meets nothing it could disagree with.
//
// Left out of the bundle: the native SQLite driver and pg (loaded from
// node_modules, as the unbundled command loads them), and heapGrowth.js (the
// command's heap flags: main.ts has loaded it already; the bulk enqueue
// shares that one module to release the young generation).
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/** The packages a bundle holds (name and folder), by the files esbuild read into it. */
const packagesOf = (inputs) => {
  const dirs = new Map()
  for (const file of inputs) {
    const m = /^(.*node_modules\/((?:@[^/]+\/)?[^/]+))\//.exec(file)
    if (m) dirs.set(m[2], m[1])
  }
  return [...dirs].sort(([a], [b]) => a.localeCompare(b))
}

/** Their licences, which an MIT or ISC licence asks a copy to carry. */
const noticeOf = (root, packages) =>
  packages.map(([name, folder]) => {
    const dir = join(root, folder)
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))
    const licence = ["LICENSE", "LICENSE.md", "LICENSE.txt", "license"]
      .map((file) => { try { return readFileSync(join(dir, file), "utf8") } catch { return undefined } })
      .find((text) => text !== undefined)
    return `## ${name} ${pkg.version} (${pkg.license})\n\n${licence ?? `Licensed under ${pkg.license}.`}\n`
  }).join("\n")

export const bundleHot = async (root) => {
  const { build } = await import("esbuild")
  const cli = join(root, "dist", "cli")
  const result = await build({
    entryPoints: { hotArgv: join(cli, "hotArgv.js"), hot: join(cli, "hot.js") },
    outdir: join(root, "dist", "hot"),
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    minify: true,
    metafile: true,
    logLevel: "warning",
    external: ["pg", "pg-native", "better-sqlite3"],
    // Some of the bundled packages are CommonJS that `require`s node's own modules.
    banner: { js: "import{createRequire as __docketRequire}from'node:module';const require=__docketRequire(import.meta.url);" },
    plugins: [{
      name: "shared-heap-flags",
      setup: (b) => b.onResolve({ filter: /\/heapGrowth\.js$/ }, () => ({ path: "../cli/heapGrowth.js", external: true }))
    }]
  })
  const inputs = Object.values(result.metafile.outputs).flatMap((o) => Object.keys(o.inputs))
  const packages = packagesOf(inputs)
  writeFileSync(
    join(root, "dist", "hot", "THIRD-PARTY-NOTICES.md"),
    `# What dist/hot/ bundles\n\nscripts/bundleHot.mjs bundles \`docket enqueue\` and \`docket stats\` with these packages' code:\n\n${noticeOf(root, packages)}`
  )
  return { files: Object.keys(result.metafile.outputs).length, modules: new Set(inputs).size, packages: packages.map(([name]) => name) }
}
