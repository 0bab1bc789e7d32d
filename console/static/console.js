// Behaviour shared by every page (the CSP allows no inline script: it all lives here).
"use strict";

// An htmx request the console could not answer (it stopped, the network failed): say so on
// the page instead of leaving the form as it was. Answers with errors of the API come back
// as fragments with the error inside (console/forms.py), not as failures.
function showRequestFailure(event, why) {
  const target = event.detail.target || document.querySelector("main");
  const box = document.createElement("div");
  box.className = "error";
  box.setAttribute("role", "alert");
  box.textContent = why;
  target.prepend(box);
}

document.addEventListener("htmx:responseError", (event) => {
  showRequestFailure(event, `The console answered HTTP ${event.detail.xhr.status}: reload the page.`);
});
document.addEventListener("htmx:sendError", (event) => {
  showRequestFailure(event, "The console cannot be reached: is it still running?");
});
