import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 180_000,
    // PostgreSQL tests each make their own database; SQLite tests their own file.
    fileParallelism: true,
    maxWorkers: 2,
    minWorkers: 1
  }
})
