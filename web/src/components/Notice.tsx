import { ApiError } from "../api";

// What went wrong with a call, in words, with the server's problems when it sent some.
export function ErrorNotice({ error }: { error: unknown }) {
  if (!error) return null;
  const message = error instanceof ApiError ? error.message : (error as Error)?.message ?? String(error);
  return <div class="ui-error" role="alert">{message}</div>;
}
