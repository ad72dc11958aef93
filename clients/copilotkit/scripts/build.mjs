// Builds dist/ (../../scripts/build-package.mjs): @copilotkit/runtime (types only) and rxjs
// stay external (peer dependencies); a Node package.
import { buildPackage } from "../../scripts/build-package.mjs";

await buildPackage(new URL("..", import.meta.url), { external: ["@copilotkit/runtime", "rxjs"], platform: "node" });
