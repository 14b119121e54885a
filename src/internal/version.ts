/**
 * Docket's version, from its package.json: the package's root is two folders
 * up from src/internal/version.ts and from dist/internal/version.js alike.
 * Read once, on first use; "0.0.0" when it cannot be read (an application
 * bundled without the package's files).
 */
import { readFileSync } from "node:fs"

let version: string | undefined

/** The version in Docket's package.json. */
export const docketVersion = (): string => {
  if (version === undefined) {
    try {
      version = String(JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version)
    } catch {
      version = "0.0.0"
    }
  }
  return version
}
