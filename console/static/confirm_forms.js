// A plain form with data-confirm asks before it submits (revoke a key, remove an ACL or a
// quota, apply an offset reset): the pages that have such forms load this file.
"use strict";

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
  if (!window.confirm(form.dataset.confirm)) event.preventDefault();
});
