// Builds dist/ (../../scripts/build-package.mjs): @ag-ui/client and rxjs stay external (peer
// dependencies); platform-neutral, for browsers and Node alike.
import { buildPackage } from "../../scripts/build-package.mjs";

await buildPackage(new URL("..", import.meta.url), { external: ["@ag-ui/client", "rxjs"], platform: "neutral" });
