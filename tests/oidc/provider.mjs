// A real OpenID Connect provider for the sign-in tests: node provider.mjs PORT CONFIG.json
// oidc-provider (OpenID certified) with its own login page (devInteractions: any password; the login is the account),
// discovery at /.well-known/openid-configuration and RS256-signed ID tokens. CONFIG holds the one client (the app
// under test) and each account's claims: {"client": {...}, "accounts": {"ada@example.org": {"groups": [...]}}}.
import { readFileSync } from "node:fs";
import Provider from "oidc-provider";

const [port, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: config.client.client_id,
    client_secret: config.client.client_secret,
    redirect_uris: [config.client.redirect_uri],
    grant_types: ["authorization_code"],
    response_types: ["code"],
  }],
  claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name", "groups"] },
  conformIdTokenClaims: false, // the ID token carries the scopes' claims, which the app reads as st.user
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ["pinpoint-test-provider"] },
  async findAccount(ctx, id) {
    const extra = config.accounts[id];
    return {
      accountId: id,
      async claims() {
        if (extra === undefined) return { sub: id, email: id, email_verified: true, name: id };
        return { sub: id, email: id, email_verified: extra.email_verified ?? true, name: id, groups: extra.groups ?? [] };
      },
    };
  },
});
provider.listen(Number(port), "127.0.0.1", () => console.log(`oidc-provider listening on ${issuer}`));
