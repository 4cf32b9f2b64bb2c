import { defineConfig } from "vitest/config";

// The app is built into dist/, which is committed and embedded in the
// penguin binary (web/embed.go), so building Penguin needs no Node.
export default defineConfig({
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    sourcemap: false,
    // One small bundle; a chunk per page is not worth the requests.
    chunkSizeWarningLimit: 300,
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
