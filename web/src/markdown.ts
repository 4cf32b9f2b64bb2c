// The model's answers as Markdown: parsed by marked (GitHub's flavour:
// tables, task lists, fenced code), then sanitized by DOMPurify before
// the page sees it. A model's answer is untrusted text (a file it read can
// put anything in it), so:
//   - raw HTML in the Markdown is shown as text, never parsed as HTML;
//   - DOMPurify removes scripts, event handlers and javascript: URLs from
//     whatever the parser made, as a second line;
//   - images are shown as links: an <img> would fetch any address the
//     model names as soon as the answer renders, which lets a prompt
//     injection send workspace contents to a server in the URL;
//   - links open in a new tab with rel="noopener noreferrer".
// Code blocks carry a copy button; their highlighting (highlight.js) is
// loaded on the first code block, so the first page does not ship it.
import DOMPurify from "dompurify";
import { Marked, type Tokens } from "marked";

const escapes: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escape = (s: string) => s.replace(/[&<>"']/g, (c) => escapes[c]);

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    html({ text }: Tokens.HTML | Tokens.Tag) {
      return escape(text);
    },
    image({ href, text }: Tokens.Image) {
      return `<a href="${escape(href)}" class="image-link">${escape(text || href)}</a>`;
    },
    code({ text, lang }: Tokens.Code) {
      const language = (lang ?? "").match(/^[\w+#.-]+/)?.[0] ?? "";
      const cls = language ? ` class="language-${escape(language)}"` : "";
      const label = language ? `<span class="code-lang">${escape(language)}</span>` : "";
      return `<div class="code-block">${label}<button type="button" class="copy" aria-label="Copy code">Copy</button><pre><code${cls}>${escape(text)}</code></pre></div>`;
    },
  },
});

let hooked = false;
function purifier() {
  if (!hooked) {
    hooked = true;
    DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A") {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
      if (node.tagName === "INPUT") {
        // Task list boxes show a state; they are not a form. Named by
        // their state, for a screen reader (the item's text follows).
        node.setAttribute("disabled", "");
        node.setAttribute("aria-label", node.hasAttribute("checked") ? "done" : "not done");
      }
    });
  }
  return DOMPurify;
}

const cache = new Map<string, string>();

/** renderMarkdown returns the sanitized HTML of a Markdown text. The last
 * few hundred results are kept: a long session renders each answer once,
 * and a streaming answer renders only its newest prefix. */
export function renderMarkdown(text: string): string {
  const hit = cache.get(text);
  if (hit !== undefined) return hit;
  const raw = marked.parse(text, { async: false }) as string;
  const html = purifier().sanitize(raw, {
    FORBID_TAGS: ["img", "style", "form", "iframe", "object", "embed", "svg", "math"],
    FORBID_ATTR: ["style"],
  });
  if (cache.size > 500) cache.delete(cache.keys().next().value!);
  cache.set(text, html);
  return html;
}

type HLJS = typeof import("highlight.js").default;
let hljs: Promise<HLJS> | undefined;

/** highlight colours the code blocks under root that have a language,
 * loading highlight.js the first time one is there. */
export async function highlight(root: HTMLElement): Promise<void> {
  const blocks = root.querySelectorAll<HTMLElement>("pre code[class*='language-']:not(.hljs)");
  if (!blocks.length) return;
  hljs ??= import("highlight.js/lib/common").then((m) => m.default);
  const h = await hljs;
  for (const b of blocks) {
    const lang = [...b.classList].find((c) => c.startsWith("language-"))?.slice(9) ?? "";
    if (!b.isConnected || !h.getLanguage(lang)) continue;
    h.highlightElement(b);
  }
}

/** onCodeCopy copies a code block's text when its copy button is clicked
 * (one listener on the answer, not one per button). */
export function onCodeCopy(e: MouseEvent) {
  const button = (e.target as HTMLElement).closest?.("button.copy");
  if (!button) return;
  const code = button.parentElement?.querySelector("code");
  if (!code) return;
  void navigator.clipboard?.writeText(code.textContent ?? "").then(() => {
    button.textContent = "Copied";
    setTimeout(() => (button.textContent = "Copy"), 1200);
  }).catch(() => {
    button.textContent = "Copy failed";
  });
}
