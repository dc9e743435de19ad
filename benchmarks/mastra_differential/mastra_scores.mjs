// Mastra's heuristic scorers (@mastra/evals 1.10.2) on the rows of rows.json, one JSON line per
// row on stdout: {"id", "scorer", "score"} or {"id", "scorer", "error"}. Run by compare.py.
import { readFileSync } from "node:fs";
import {
  createCompletenessScorer,
  createToneScorer,
} from "@mastra/evals/scorers/prebuilt";
import { createAgentTestRun, createTestMessage } from "@mastra/evals/scorers/utils";

const rows = JSON.parse(readFileSync(process.argv[2], "utf8"));
for (const row of rows) {
  const scorer = row.scorer === "completeness"
    ? createCompletenessScorer()
    : createToneScorer(row.reference_tone ? { referenceTone: row.reference_tone } : {});
  const run = createAgentTestRun({
    inputMessages: [createTestMessage({ content: row.input ?? "", role: "user" })],
    output: [createTestMessage({ content: row.output, role: "assistant" })],
  });
  try {
    const result = await scorer.run(run);
    console.log(JSON.stringify({ id: row.id, scorer: row.scorer, score: result.score }));
  } catch (error) {
    console.log(JSON.stringify({ id: row.id, scorer: row.scorer, error: String(error) }));
  }
}
