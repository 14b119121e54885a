/**
 * The worker command's event lines (src/cli/status.ts): a storage error is
 * named once, whether its text is a StorageError's message (which already says
 * "storage error in <operation>") or a bare cause.
 */
import { describe, expect, it } from "vitest"
import { describeEvent } from "../../src/cli/status.js"
import { StorageError } from "../../src/Errors.js"

describe("docket worker's storage error line", () => {
  it("says 'storage error in <operation>' once for a StorageError's message", () => {
    const error = new StorageError({ operation: "claim", cause: new Error("sorry, too many clients already") })
    const line = describeEvent({ _tag: "StorageFailed", operation: "claim", error: error.message })
    expect(line).toMatch(/ storage error in claim: .*too many clients/)
    expect(line?.match(/storage error in/g)).toHaveLength(1)
  })

  it("names the operation for a bare cause", () => {
    const line = describeEvent({ _tag: "StorageFailed", operation: "record outcome", error: "database or disk is full" })
    expect(line).toMatch(/ storage error in record outcome: database or disk is full$/)
  })
})
