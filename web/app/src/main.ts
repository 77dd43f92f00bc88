import { mount } from 'svelte';
import './styles/app.css';
import './styles/theme.css';
import './styles/layout.css';
import App from './App.svelte';

const target = document.getElementById('app');
if (!target) throw new Error('#app is missing from index.html');

export default mount(App, { target });
