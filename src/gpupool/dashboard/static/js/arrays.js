// Array tasks in the queue, named and folded as `gpupool queue` does (cli/array_rows.py):
// a task is `A_I` (task I of array A, whose id is its first task's id), and the pending tasks
// of an array fold into one row `A_[2-19%2]` (their indices as Slurm writes them, and the
// array's %K), where its first pending task would be. Only the tasks on the page fold: the
// queue is read a page at a time (queue.js).

/** A job's name in the ID column: `A_I` for a task of array A, else its id. */
export function taskLabel(job) {
  if (job.array_id === null || job.array_id === undefined) return String(job.id);
  if (job.array_index === null || job.array_index === undefined) return String(job.id);
  return `${job.array_id}_${job.array_index}`;
}

/** Sorted indices as ranges, Slurm's way: [1, 3, 5, 6, 7] -> "1,3,5-7"
 *  (core/job_control.py format_indices). */
export function formatIndices(indices) {
  const values = [...new Set(indices)].sort((a, b) => a - b);
  const parts = [];
  for (let i = 0; i < values.length; ) {
    let j = i;
    while (j + 1 < values.length && values[j + 1] === values[j] + 1) j += 1;
    parts.push(i === j ? String(values[i]) : `${values[i]}-${values[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

function isTask(job) {
  return job.array_id !== null && job.array_id !== undefined && job.array_index !== null && job.array_index !== undefined;
}

/** The queue's rows for `jobs`, in their order: [{label, job, tasks, position}], where `job`
 *  is the first of the `tasks` a row stands for (one, or an array's pending tasks folded)
 *  and `position` is its index in `jobs`. */
export function queueRows(jobs) {
  const pending = new Map(); // array id -> its pending tasks on this page, in queue order
  for (const job of jobs) {
    if (isTask(job) && job.state === "PENDING") {
      if (!pending.has(job.array_id)) pending.set(job.array_id, []);
      pending.get(job.array_id).push(job);
    }
  }
  const rows = [];
  jobs.forEach((job, position) => {
    const tasks = job.state === "PENDING" && isTask(job) ? pending.get(job.array_id) : null;
    if (!tasks || tasks.length === 1) {
      rows.push({ label: taskLabel(job), job, tasks: [job], position });
    } else if (tasks[0] === job) {
      const limit = job.array_limit === null || job.array_limit === undefined ? "" : `%${job.array_limit}`;
      const label = `${job.array_id}_[${formatIndices(tasks.map((t) => t.array_index))}${limit}]`;
      rows.push({ label, job, tasks, position });
    }
  });
  return rows;
}
