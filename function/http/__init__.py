"""What every HTTP edge shares (the API in function.api, the job routes in function.jobs, Polly's API in
function.polly): what the middleware tells a route about its request (the caller, the request id, the
synthesis tag), request bodies read once and replayed, and streamed synthesis replies."""
