import { describe, expect, it } from 'vitest';
import { redirectUriMatches, redirectUriProblem } from '../src/modules/sign-in/redirect-uris';

describe('OAuth redirect URIs', () => {
  it('registers https, loopback http and reverse-domain private schemes, nothing else', () => {
    for (const ok of [
      'https://app.example/callback',
      'http://127.0.0.1:3000/cb',
      'http://localhost/cb',
      'http://[::1]:8080/cb',
      'com.example.app:/oauth2redirect',
    ])
      expect(redirectUriProblem(ok), ok).toBeUndefined();
    for (const bad of [
      'http://app.example/cb',
      'http://127.0.0.1.nip.io/cb',
      'https://app.example/cb#x',
      'https://user:pw@app.example/cb',
      'javascript:alert(1)',
      'data:text/html,x',
      'file:///etc/passwd',
      'myapp:/cb',
      '/relative',
      '',
    ])
      expect(redirectUriProblem(bad), bad).toBeDefined();
  });

  it('matches the registered string exactly, except the port of a loopback http URI', () => {
    const registered = ['http://127.0.0.1:7777/callback', 'https://app.example/cb?x=1'];
    expect(redirectUriMatches(registered, 'http://127.0.0.1:7777/callback')).toBe(true);
    expect(redirectUriMatches(registered, 'http://127.0.0.1:40001/callback')).toBe(true);
    expect(redirectUriMatches(registered, 'http://127.0.0.1:40001/callback/')).toBe(false);
    expect(redirectUriMatches(registered, 'http://localhost:7777/callback')).toBe(false);
    expect(redirectUriMatches(registered, 'https://app.example/cb?x=1')).toBe(true);
    expect(redirectUriMatches(registered, 'https://app.example/cb?x=2')).toBe(false);
    expect(redirectUriMatches(registered, 'https://app.example/cb')).toBe(false);
    expect(redirectUriMatches(registered, 'http://127.0.0.1:7777/callback#f')).toBe(false);
  });
});
