import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

/**
 * Outside production a fresh clone must start with no environment at all: the admin token and the
 * secrets key are generated once, kept in a git-ignored `.env`, and reused on every later start.
 * Returns the admin token when it was generated now, so the caller prints it exactly once.
 */
export function ensureLocalSecrets(env: NodeJS.ProcessEnv, path = '.env'): { generatedAdminToken?: string } {
  // The environment wins over the file; an empty value (a placeholder such as `ADMIN_TOKEN=`) counts
  // as unset everywhere, as loadConfig treats it, so it is filled in once rather than every start.
  const existing = existsSync(path) ? readFileSync(path, 'utf8') : undefined;
  if (existing !== undefined) {
    // As with dotenv, a later line for the same key wins over an earlier one.
    for (const [key, value] of new Map(parseDotenv(existing))) if (value !== '' && !env[key]) env[key] = value;
  }
  if (env.NODE_ENV === 'production') return {};
  const additions: Array<[string, string]> = [];
  let generatedAdminToken: string | undefined;
  if (!env.ADMIN_TOKEN) {
    generatedAdminToken = `adm_${randomBytes(24).toString('base64url')}`;
    env.ADMIN_TOKEN = generatedAdminToken;
    additions.push(['ADMIN_TOKEN', generatedAdminToken]);
  }
  if (!env.SECRETS_KEY) {
    env.SECRETS_KEY = randomBytes(32).toString('base64');
    additions.push(['SECRETS_KEY', env.SECRETS_KEY]);
  }
  if (additions.length > 0) {
    let text = existing ?? '# Generated on first start; keep out of version control.\n';
    for (const [key, value] of additions) {
      // Fill an empty placeholder in place; otherwise append.
      const placeholder = new RegExp(`^[ \\t]*${key}[ \\t]*=[ \\t]*(?:""|'')?[ \\t]*$`, 'm');
      text = placeholder.test(text) ? text.replace(placeholder, () => `${key}=${value}`) : `${text.replace(/\n*$/, '\n')}${key}=${value}\n`;
    }
    writeFileSync(path, text, { mode: 0o600 });
  }
  return generatedAdminToken ? { generatedAdminToken } : {};
}

function parseDotenv(text: string): Array<[string, string]> {
  return text
    .split(/\r?\n/)
    .map((line) => /^\s*([A-Z0-9_]+)\s*=\s*(.*?)\s*$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => [m[1]!, m[2]!.replace(/^(['"])(.*)\1$/, '$2')]);
}
