/**
 * The migration file splitter: statements end at a `;` that ends a line,
 * except inside dollar-quoted text (a PostgreSQL function's body).
 */
import { describe, expect, it } from "vitest"
import { splitStatements } from "../../src/internal/migrationFiles.js"

describe("splitStatements", () => {
  it("splits at a ; ending a line and drops comment lines", () => {
    expect(splitStatements("-- a table\nCREATE TABLE a (x int);\n\nCREATE INDEX b ON a (x);  \n-- the end\n")).toEqual([
      "CREATE TABLE a (x int)",
      "CREATE INDEX b ON a (x)"
    ])
  })

  it("keeps a dollar-quoted function body whole, whatever its tag", () => {
    const fn = "CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$\nBEGIN\n  PERFORM 1;\n  RETURN 2;\nEND\n$$"
    const tagged = "CREATE FUNCTION g() RETURNS text LANGUAGE sql AS $body$\nSELECT '$$;';\n$body$"
    expect(splitStatements(`${fn};\n${tagged};\nSELECT 1;\n`)).toEqual([fn, tagged, "SELECT 1"])
  })

  it("a file of comments only has no statements", () => {
    expect(splitStatements("-- nothing to do here\n-- at all\n")).toEqual([])
  })
})
