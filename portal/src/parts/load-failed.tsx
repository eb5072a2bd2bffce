/**
 * Why a page's record could not be shown. A 404 is said plainly, and in the same words whether the
 * record does not exist or lies outside this link's scope: the server does not tell them apart either.
 */
export function LoadFailed({ what, failure }: { what: string; failure: { message: string; status?: number } }) {
  if (failure.status === 404) {
    return (
      <div role="alert" class="panel" data-not-found>
        <h2>Not found</h2>
        <p>There is no {what} with this id that this link can see.</p>
      </div>
    );
  }
  return <p role="alert">{failure.message}</p>;
}
