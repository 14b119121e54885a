/**
 * docs/architecture.md kept true: its layout names every file in src/ and no
 * file that is gone, and no module of src/ imports one that imports it back
 * (type-only imports, `export ... from` and `import("...")` types included).
 *
 * The layout block's format (stated in the doc too): the first ``` block
 * under "## The layout". `src/` opens it; an entry is a file name (`name.ts`),
 * a comma list of them (`pg.ts, sqlite.ts`) or a folder (`name/`), at an
 * indent of two spaces per level, followed by two spaces or more and its
 * description; a line indented deeper than an entry could be continues the
 * description above it.
 */
import { describe, expect, it } from "vitest"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, normalize, relative } from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const SRC = join(ROOT, "src")

/** Every .ts file under src/, as a path relative to the repository ("src/internal/pg.ts"). */
const sourceFiles = (dir = SRC): Array<string> =>
  readdirSync(dir).sort().flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sourceFiles(path)
    return name.endsWith(".ts") ? [relative(ROOT, path)] : []
  })

const ENTRY = /^((?:[\w.-]+\.ts)(?:, [\w.-]+\.ts)*|[\w-]+\/)(?: {2,}\S.*)?$/

/** The files the layout block lists, or the lines it cannot read. */
const parseLayout = (doc: string): { readonly files: Array<string>; readonly errors: Array<string> } => {
  const lines = doc.split("\n")
  const heading = lines.findIndex((line) => line.trim() === "## The layout")
  const open = lines.findIndex((line, i) => i > heading && line.startsWith("```"))
  const close = lines.findIndex((line, i) => i > open && line.startsWith("```"))
  if (heading < 0 || open < 0 || close < 0) return { files: [], errors: ["no ``` block under \"## The layout\""] }
  const block = lines.slice(open + 1, close)
  if (block[0] !== "src/") return { files: [], errors: [`the block must open with "src/", not "${block[0]}"`] }
  const folders = ["src"]
  const files: Array<string> = []
  const errors: Array<string> = []
  block.slice(1).forEach((line, i) => {
    if (line.trim() === "") return
    const indent = line.length - line.trimStart().length
    // An entry sits at most one level below the innermost open folder; deeper lines continue a description.
    if (indent > 2 * folders.length) return
    const where = `docs/architecture.md line ${open + 3 + i}`
    const entry = ENTRY.exec(line.trimStart())
    if (indent % 2 !== 0 || entry === null) {
      errors.push(`${where}: not an entry ("name.ts", "a.ts, b.ts" or "name/" at two spaces a level, then two spaces and the description): ${line.trim()}`)
      return
    }
    folders.length = indent / 2
    const names = entry[1]
    if (names.endsWith("/")) folders.push(names.slice(0, -1))
    else for (const name of names.split(", ")) files.push([...folders, name].join("/"))
  })
  return { files, errors }
}

/** Relative module specifiers of a source, comments left out (a doc comment may show an import). */
const specifiers = (source: string): Array<string> => {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "")
  const found: Array<string> = []
  const patterns = [
    /\b(?:import|export)\b[^"'`;]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']/g,
    /\bimport\s*\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g,
    /^\s*import\s*["'](\.{1,2}\/[^"']+)["']/gm
  ]
  for (const pattern of patterns) for (const match of code.matchAll(pattern)) found.push(match[1])
  return found
}

/** A specifier from `file` to the src/ file it names: `./x.js` is x.ts, a folder its index.ts. */
const resolveImport = (file: string, specifier: string): string | null => {
  const base = normalize(join(dirname(file), specifier))
  const candidates = [base.replace(/\.js$/, ".ts"), `${base}.ts`, join(base, "index.ts")]
  return candidates.find((path) => path.startsWith("src/") && existsSync(join(ROOT, path)) && statSync(join(ROOT, path)).isFile()) ?? null
}

/** Every cycle of imports, each as a path that starts and ends at the same file (one per strongly connected set). */
const importCycles = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
  // Tarjan's strongly connected components; a component of two or more files, or a file importing itself, has a cycle.
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const components: Array<Array<string>> = []
  const visit = (v: string) => {
    index.set(v, index.size)
    low.set(v, index.get(v)!)
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) === index.get(v)) {
      const component: Array<string> = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) components.push(component)
    }
  }
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v)
  return components.map((component) => cyclePath(graph, new Set(component)))
}

/** One cycle through a strongly connected set, found by a walk that stays inside it. */
const cyclePath = (graph: ReadonlyMap<string, ReadonlyArray<string>>, inside: ReadonlySet<string>): Array<string> => {
  const start = [...inside].sort()[0]
  const seen = new Map<string, string>()
  const queue = [start]
  while (queue.length > 0) {
    const v = queue.shift()!
    for (const w of graph.get(v) ?? []) {
      if (!inside.has(w)) continue
      if (w === start) {
        const path = [start]
        for (let at = v; at !== start; at = seen.get(at)!) path.splice(1, 0, at)
        return [...path, start]
      }
      if (!seen.has(w)) {
        seen.set(w, v)
        queue.push(w)
      }
    }
  }
  return [start]
}

describe("docs/architecture.md", () => {
  const files = sourceFiles()
  const layout = parseLayout(readFileSync(join(ROOT, "docs/architecture.md"), "utf8"))

  it("its layout block reads: every entry line is a file name, a comma list of them or a folder", () => {
    expect(layout.errors).toEqual([])
  })

  it("its layout lists every file in src/, and no file that is not there", () => {
    const listed = new Set(layout.files)
    const missing = files.filter((file) => !listed.has(file))
    const gone = layout.files.filter((file) => !files.includes(file))
    expect(missing, `files in src/ missing from the layout in docs/architecture.md: ${missing.join(", ")}`).toEqual([])
    expect(gone, `files the layout in docs/architecture.md lists that src/ does not have: ${gone.join(", ")}`).toEqual([])
    expect(layout.files.length, "a file listed twice").toBe(listed.size)
  })

  it("no module in src/ imports one that imports it back (type-only imports included)", () => {
    const graph = new Map(files.map((file) => {
      const source = readFileSync(join(ROOT, file), "utf8")
      const targets = specifiers(source).map((specifier) => {
        const target = resolveImport(file, specifier)
        expect(target, `${file} imports ${specifier}, which names no file in src/`).not.toBeNull()
        return target!
      })
      return [file, [...new Set(targets)]] as const
    }))
    const cycles = importCycles(graph).map((cycle) => cycle.join(" -> "))
    expect(cycles, `import cycles in src/:\n${cycles.join("\n")}`).toEqual([])
  })
})

describe("the architecture test's own readers", () => {
  it("the layout parser reads folders, comma lists and continuation lines, and refuses anything else", () => {
    const doc = [
      "## The layout",
      "```",
      "src/",
      "  index.ts            the public API",
      "  internal/",
      "    pg.ts, sqlite.ts  the dialects, whose description",
      "                      goes on: clock.ts, here, is not an entry",
      "    sql/              one file per operation",
      "      claim.ts        the claim",
      "  Worker.ts           the pool",
      "  not a file          broken",
      "```"
    ].join("\n")
    const { errors, files } = parseLayout(doc)
    expect(files).toEqual(["src/index.ts", "src/internal/pg.ts", "src/internal/sqlite.ts", "src/internal/sql/claim.ts", "src/Worker.ts"])
    expect(errors).toHaveLength(1)
    expect(errors[0]).toContain("not a file")
  })

  it("the cycle finder finds a cycle of two, of three and a file importing itself, and none in a tree", () => {
    const graph = new Map<string, Array<string>>([
      ["a", ["b"]],
      ["b", ["a", "c"]],
      ["c", []],
      ["d", ["e"]],
      ["e", ["f"]],
      ["f", ["d"]],
      ["g", ["g"]]
    ])
    expect(importCycles(graph)).toEqual([["a", "b", "a"], ["d", "e", "f", "d"], ["g", "g"]])
    expect(importCycles(new Map([["x", ["y"]], ["y", ["z"]], ["z", []]]))).toEqual([])
  })

  it("the import reader sees type-only imports, re-exports and import() types, not imports in comments", () => {
    const source = [
      "/** Use it as `import { X } from \"./commented.js\"`. */",
      "import type { A } from \"./a.js\"",
      "import {",
      "  B,",
      "  type C",
      "} from \"../b.js\"",
      "export type { D } from \"./d.js\"",
      "export * as E from \"./e.js\"",
      "type F = import(\"./f.js\").F",
      "import \"./g.js\"",
      "// import { H } from \"./h.js\"",
      "import { Effect } from \"effect\""
    ].join("\n")
    expect(specifiers(source).sort()).toEqual(["../b.js", "./a.js", "./d.js", "./e.js", "./f.js", "./g.js"])
  })
})
