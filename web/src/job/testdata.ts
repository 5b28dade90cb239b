// Jobs as a real `baton run standalone` answered GET /jobs/{id} for the files in
// examples/ (testdata/*.json, context left out), for the unit tests.
import type { Job } from "../api";

const files = import.meta.glob("./testdata/*.json", { eager: true, import: "default" }) as Record<string, Job>;

export function realJob(name: string): Job {
  const j = files[`./testdata/${name}.json`];
  if (!j) throw new Error(`no testdata/${name}.json`);
  return structuredClone(j);
}
