// Behaviour shared by every page (the CSP allows no inline script: it all lives here).
"use strict";

// A form with data-confirm asks before it submits (delete a topic, ...).
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
  const typed = form.querySelector("input[name=confirm_name]");
  if (typed) return; // the typed-name confirmation step is checked by the server
  if (!window.confirm(form.dataset.confirm)) event.preventDefault();
});
