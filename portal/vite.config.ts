import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

// Served by the API at /portal/ under CSP `script-src 'self'`: one external module script, no
// inline code, nothing from another origin.
export default defineConfig({
  root: import.meta.dirname,
  base: './',
  plugins: [preact({ prerender: { enabled: false } })],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
  },
});
