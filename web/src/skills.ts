/** Skills pinned to a message: the engine writes them as a `[use_skills]`
 * block at the start of the message (RunRequest.skills); the transcript
 * shows the names as a chip instead of the raw block. */

/** parseSkillsBlock reads a message that starts with a `[use_skills]`
 * block (or the older `<use_skills>` form): the skill names and the rest
 * of the message; null when the message has no such block. */
export function parseSkillsBlock(text: string): { skills: string[]; rest: string } | null {
  const m = /^(?:\[use_skills\]\nskills: ([^\n]*)\n\[\/use_skills\]|<use_skills>\nskills: ([^\n]*)\n<\/use_skills>)(?:\n\n([\s\S]*))?$/.exec(text);
  if (!m) return null;
  const skills = (m[1] ?? m[2]).split(",").map((s) => s.trim()).filter(Boolean);
  if (!skills.length) return null;
  return { skills, rest: m[3] ?? "" };
}
