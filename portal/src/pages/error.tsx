const titles: Record<string, string> = {
  link_used: 'This link has already been used',
  link_expired: 'This link has expired',
  session_revoked: 'This session was ended',
  unauthorized: 'This link is not valid',
  no_link: 'No portal link',
  network: 'The server could not be reached',
};

const next: Record<string, string> = {
  link_used: 'Each link opens the portal once. Ask for a new link.',
  link_expired: 'Ask for a new link.',
  session_revoked: 'Access was withdrawn. Ask for a new link if you still need it.',
  unauthorized: 'Ask for a new link.',
};

export function ErrorPage({ code, message }: { code: string; message: string }) {
  return (
    <main class="error-page">
      <h1>{titles[code] ?? 'The portal could not open'}</h1>
      <p>{message}</p>
      {next[code] && <p>{next[code]}</p>}
    </main>
  );
}
