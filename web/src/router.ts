// A path router over the history API: the app's pages are real paths, and
// the gateway answers every one of them with index.html, so a reload or a
// shared link lands on the same page.
import { useEffect, useState } from "preact/hooks";

export function navigate(path: string, replace = false) {
  if (location.pathname === path) return;
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  dispatchEvent(new PopStateEvent("popstate"));
}

export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const on = () => setPath(location.pathname);
    addEventListener("popstate", on);
    return () => removeEventListener("popstate", on);
  }, []);
  return path;
}

/** link makes an anchor navigate in the app on a plain click. */
export function onLink(e: MouseEvent) {
  const a = (e.currentTarget as HTMLAnchorElement);
  if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute("href") ?? "/");
}
