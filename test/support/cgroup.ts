/**
 * A memory-limited Linux cgroup for one child process (issue 34: does the
 * worker fit a 128 MiB container?), on whichever hierarchy the machine gives
 * the memory controller to:
 *
 * - cgroup v1 (a `memory` hierarchy mounted on its own, as on the project's
 *   current machines): a new group inside this process's own memory group
 *   (so whatever limits and accounts this process's group still covers the
 *   child: use_hierarchy) with memory.limit_in_bytes (and
 *   memory.memsw.limit_in_bytes, so swap cannot stretch it, where the kernel
 *   accounts swap);
 * - cgroup v2 with the memory controller delegated to this process's group:
 *   a leaf for this process (a group with processes cannot give controllers
 *   to children), then the child's group with memory.max and memory.swap.max 0.
 *
 * Where neither can be made (no memory controller, not root) `makeMemoryCgroup`
 * says why instead, and the caller skips with that reason.
 *
 * The child is started by a shell that first writes its own pid into the
 * group, then execs the command: everything the command allocates is charged
 * to the group from its first page.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"

export interface MemoryCgroup {
  readonly version: 1 | 2
  readonly dir: string
  /** `sh -c` arguments that move the shell into the group and exec `command`. */
  readonly wrap: (command: ReadonlyArray<string>) => ReadonlyArray<string>
  /** The highest memory the group was charged (bytes). */
  readonly peak: () => number | undefined
  /** How many times the kernel's OOM killer killed a process of the group. */
  readonly oomKills: () => number
  /** Removes the group (its processes must have exited). */
  readonly remove: () => void
}

const read = (file: string): string | undefined => {
  try {
    return readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

const mounts = () =>
  readFileSync("/proc/self/mountinfo", "utf8").split("\n").map((line) => {
    const fields = line.split(" ")
    const dash = fields.indexOf("-")
    return { point: fields[4], type: fields[dash + 1], options: fields[dash + 3] ?? "" }
  })

const wrapInto = (dir: string) => (command: ReadonlyArray<string>) =>
  ["-c", `echo $$ > ${join(dir, "cgroup.procs")} && exec "$0" "$@"`, ...command]

const numberIn = (text: string | undefined, key: string): number => {
  const line = text?.split("\n").find((l) => l.startsWith(`${key} `))
  return line === undefined ? 0 : Number(line.split(" ")[1])
}

const makeV1 = (point: string, name: string, bytes: number): MemoryCgroup => {
  const own = read("/proc/self/cgroup")?.split("\n").find((line) => /^\d+:memory:/.test(line))
  const dir = join(point, own === undefined ? "/" : own.slice(own.indexOf(":memory:") + 8), name)
  mkdirSync(dir)
  writeFileSync(join(dir, "memory.limit_in_bytes"), String(bytes))
  if (existsSync(join(dir, "memory.memsw.limit_in_bytes"))) writeFileSync(join(dir, "memory.memsw.limit_in_bytes"), String(bytes))
  return {
    version: 1,
    dir,
    wrap: wrapInto(dir),
    peak: () => Number(read(join(dir, "memory.max_usage_in_bytes")) ?? NaN),
    oomKills: () => numberIn(read(join(dir, "memory.oom_control")), "oom_kill"),
    remove: () => rmdirSync(dir)
  }
}

const makeV2 = (point: string, name: string, bytes: number): MemoryCgroup | { why: string } => {
  const own = read("/proc/self/cgroup")?.split("\n").find((line) => line.startsWith("0::"))
  const parent = join(point, own === undefined ? "/" : own.slice(3))
  const controllers = (read(join(parent, "cgroup.controllers")) ?? "").trim().split(" ")
  if (!controllers.includes("memory")) {
    return { why: `the cgroup v2 hierarchy at ${point} offers [${controllers.join(" ")}] to ${parent}, not memory` }
  }
  const self = join(parent, `${name}-self`)
  mkdirSync(self)
  writeFileSync(join(self, "cgroup.procs"), String(process.pid))
  writeFileSync(join(parent, "cgroup.subtree_control"), "+memory")
  const dir = join(parent, name)
  mkdirSync(dir)
  writeFileSync(join(dir, "memory.max"), String(bytes))
  if (existsSync(join(dir, "memory.swap.max"))) writeFileSync(join(dir, "memory.swap.max"), "0")
  return {
    version: 2,
    dir,
    wrap: wrapInto(dir),
    peak: () => (existsSync(join(dir, "memory.peak")) ? Number(read(join(dir, "memory.peak"))) : undefined),
    oomKills: () => numberIn(read(join(dir, "memory.events")), "oom_kill"),
    // The controller off for the parent's children (a group with it cannot
    // hold processes), then this process back where it was.
    remove: () => {
      rmdirSync(dir)
      writeFileSync(join(parent, "cgroup.subtree_control"), "-memory")
      writeFileSync(join(parent, "cgroup.procs"), String(process.pid))
      rmdirSync(self)
    }
  }
}

/** Makes a group limited to `bytes` of memory, or says why it cannot here. */
export const makeMemoryCgroup = (name: string, bytes: number): MemoryCgroup | { why: string } => {
  if (process.platform !== "linux") return { why: `cgroups are Linux's; this is ${process.platform}` }
  const all = mounts()
  const v1 = all.find((m) => m.type === "cgroup" && m.options.split(",").includes("memory"))
  const v2 = all.find((m) => m.type === "cgroup2")
  try {
    if (v1 !== undefined) return makeV1(v1.point, name, bytes)
    if (v2 !== undefined) return makeV2(v2.point, name, bytes)
    return { why: "no cgroup hierarchy with the memory controller is mounted" }
  } catch (error) {
    return { why: `the group could not be made: ${(error as Error).message}` }
  }
}
