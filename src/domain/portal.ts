/** What a portal session may do: `read` lists and shows; `manage` also changes (replays, endpoints). */
export const PORTAL_CAPABILITIES = ['read', 'manage'] as const;
export type PortalCapability = (typeof PORTAL_CAPABILITIES)[number];
