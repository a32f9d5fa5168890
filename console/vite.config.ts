import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

/**
 * The console's build: static files under console/dist, served by the control plane at /console
 * (control-plane/src/modules/console-app). Scripts are hashed (cached for a year); the page is not.
 */
export default defineConfig({
  root: import.meta.dirname,
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    reportCompressedSize: false,
  },
});
