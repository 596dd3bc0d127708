package bff

// PageCSP is the Content-Security-Policy of every HTML page the api serves
// (the landing page, the login's refusal pages): nothing loads but inline
// style, forms post only here, and no other site may frame the page
// (clickjacking).
const PageCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
